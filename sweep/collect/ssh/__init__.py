"""The SSH transport: one paramiko connection per host, host keys, ~/.ssh/config, the deadline
watchdog."""
