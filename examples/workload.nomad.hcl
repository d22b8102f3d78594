# A workload that uses the CSI volume "vol-demo" (see volume.hcl) from the
# hostpath plugin (see hostpath-plugin.nomad.hcl). The task sees the volume
# at the published host path, in $CSIPLUG_VOLUME_DATA, and linked from its
# task dir as "data". workload.json is this same job in JSON.
job "workload" {
  group "app" {
    count = 1

    volume "data" {
      type            = "csi"
      source          = "vol-demo"
      access_mode     = "single-node-writer"
      attachment_mode = "file-system"
      read_only       = false
    }

    task "writer" {
      driver = "raw_exec"

      config {
        command = "/bin/sh"
        # $CSIPLUG_VOLUME_DATA (no braces) is left to the shell, which finds it in the environment.
        args = ["-c", "date >> \"$CSIPLUG_VOLUME_DATA/hello.txt\" && echo \"$GREETING\" >> \"$CSIPLUG_VOLUME_DATA/hello.txt\" && exec sleep 3600"]
      }

      env {
        GREETING = "hello from ${CSIPLUG_ALLOC_ID}"
      }

      volume_mount {
        volume      = "data"
        destination = "data"
      }
    }
  }
}
