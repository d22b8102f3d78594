# The hostpath CSI plugin (packages/hostpath-plugin) from its OCI image, as a
# monolith plugin job on the `docker` driver: the job a Nomad user writes
# for any CSI plugin shipped as an image. Build and push the image first
# (packages/hostpath-plugin/README.md, "The image"):
#   npm run image:hostpath -- --push registry.example.com:5000/csiplug/hostpath-plugin:0.1.0 \
#     --dest-cert-dir /etc/docker/certs.d/registry.example.com:5000 --dest-creds user:password
# then put that reference in `image` below and
#   csiplug job run examples/hostpath-plugin-image.nomad.hcl
#
# The image's entrypoint is `node …/csiplug-hostpath.js`; `args` are its flags.
# ${...} in args is filled in when the task starts:
#   CSI_ENDPOINT          the plugin's socket as the task sees it,
#                         unix:///csi/csi.sock (mount_dir), set by the csi_plugin hook
#   CSIPLUG_NODE_ID       the agent's node_id
#   CSIPLUG_PLUGIN_DATA_DIR  <data_dir>/plugin-data/<csi_plugin id>, mounted in the
#                         task at the same path: kept across the plugin's allocs
# privileged = true: the plugin bind-mounts volumes (mount(8) in the image);
# the agent's plugin "docker" { config { allow_privileged = true } } must allow it.
job "hostpath-plugin-image" {
  group "plugin" {
    task "plugin" {
      driver = "docker"

      config {
        image      = "registry.example.com:5000/csiplug/hostpath-plugin:0.1.0"
        privileged = true
        args = [
          "--endpoint", "${CSI_ENDPOINT}",
          "--node-id", "${CSIPLUG_NODE_ID}",
          "--state-dir", "${CSIPLUG_PLUGIN_DATA_DIR}/state",
          "--mode", "monolith",
        ]
      }

      csi_plugin {
        id             = "hostpath"
        type           = "monolith"
        mount_dir      = "/csi"
        health_timeout = "30s"
      }

      restart {
        attempts = 5
        interval = "10m"
        delay    = "2s"
        mode     = "delay"
      }

      kill_signal  = "SIGINT"
      kill_timeout = "10s"
    }
  }
}
