# csiplug agent config: `csiplug agent -config examples/agent.hcl`.
# Every key is shown; all but data_dir have defaults.

data_dir  = "/var/lib/csiplug"
bind_addr = "127.0.0.1" # any IP; keep loopback unless the API must be reachable from elsewhere
port      = 4747        # 0 picks a free port
node_id   = "node-1"    # default: the host name
log_level = "info"      # trace, debug, info, warn, error

# Leave tasks running when the agent exits, to re-attach on the next start.
# With the memory backend it defaults to true, and false is refused.
stop_tasks_on_exit = false

# At start, stop, unmount and remove what the state does not know (tasks,
# mounts, alloc dirs an agent whose state was lost left behind); when false,
# the agent only warns about each (see packages/agent/README.md, "Orphans").
reconcile_orphans = false

state {
  backend = "sqlite" # or "memory" (nothing survives a restart: tasks are stopped on exit)
}

timeouts {
  plugin_wait_prerun   = "1m"  # a workload waits this long for its plugin on first start
  plugin_wait_restore  = "5m"  # ... after an agent restart, for a mount that is gone (a live one is kept without its plugin)
  plugin_wait_postrun  = "1m"  # an unmount waits this long for a restarting plugin; then it is pending, retried in the background
  registry_wait        = "24h"
  plugin_health        = "30s"
  probe                = "5s"
  csi_call             = "2m"
  claim_backoff_base   = "1s"
  claim_backoff_max    = "1m"
  claim_retry_limit    = "24h"
  unmount_backoff_base = "1s"
  unmount_backoff_max  = "1m"
}

heartbeat {
  strategy             = "backoff" # or "fixed"
  interval             = "30s"
  fingerprint_interval = "30s"
  startup_initial      = "5ms"
  startup_max          = "5s"
  jitter               = 0.1
}

# acl {
#   token = "change-me"            # when set, API calls must carry it (X-Nomad-Token); without it, only root on this machine is served
#   insecure_allow_public = false  # a non-loopback bind_addr needs a token and TLS unless this is true
# }

# tls {                            # serve the API over HTTPS (needed for a non-loopback bind_addr)
#   cert_file = "/var/lib/csiplug/tls/cert.pem"  # keys under the data dir (0700): no task or local user reads them
#   key_file  = "/var/lib/csiplug/tls/key.pem"
# }

# raw_exec runs tasks as host processes with the agent's user (root). Off
# unless enabled here, as in Nomad (-dev enables it); the example jobs use it.
plugin "raw_exec" {
  config {
    enabled = true
  }
}

# Who may call the API besides this agent's own address (SECURITY.md):
http {
  allowed_hosts   = [] # extra Host names, e.g. ["csiplug.internal"]
  allowed_origins = [] # extra page origins, e.g. ["https://ui.example:8443"]
}

limits {
  http_max_conns            = 256   # connections at once; past it only health answers
  http_max_conns_per_client = 100   # ... from one address
  http_idle_timeout         = "30s" # a connection with no request in progress is closed after this
  max_allocs_per_job        = 256   # the sum of a job's group counts
}
