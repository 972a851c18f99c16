"""The demo: a loopback fleet of real sshd servers replaying H200 captures, and its capture files."""
