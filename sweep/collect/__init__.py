"""Collection: resolve the hosts, fan the agent out over an engine, keep one record per host."""
