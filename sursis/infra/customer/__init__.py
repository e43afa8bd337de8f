"""The customer agent: a supervisor that delegates to specialists over the workspace's rows."""
