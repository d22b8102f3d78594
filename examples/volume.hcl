# A volume for the hostpath plugin: `csiplug volume create examples/volume.hcl`.
id           = "vol-demo"
name         = "vol-demo"
type         = "csi"
plugin_id    = "hostpath"
capacity_min = "10MiB"

capability {
  access_mode     = "single-node-writer"
  attachment_mode = "file-system"
}
