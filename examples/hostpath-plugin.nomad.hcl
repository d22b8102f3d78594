# The hostpath CSI plugin (packages/hostpath-plugin) as a monolith plugin job.
# `csiplug job run examples/hostpath-plugin.nomad.hcl`
#
# ${...} in config and env is filled in when the task starts:
#   CSIPLUG_HOSTPATH_CLI  path of the plugin's CLI script, set by the agent
#                         (the same script is `csiplug-hostpath` in node_modules/.bin)
#   CSI_ENDPOINT          the plugin's socket, set by the csi_plugin hook
#   CSIPLUG_NODE_ID       the agent's node_id
#   CSIPLUG_PLUGIN_DATA_DIR  <data_dir>/plugin-data/<csi_plugin id>: kept across
#                         the plugin's allocs, so an updated plugin alloc finds
#                         the volumes the one before it created
# The plugin bind-mounts volumes, so the agent must run as root.
job "hostpath-plugin" {
  group "plugin" {
    task "plugin" {
      driver = "raw_exec"

      config {
        command = "node"
        args = [
          "${CSIPLUG_HOSTPATH_CLI}",
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
