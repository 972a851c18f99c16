"""Engines that run the agent on hosts: SSH (built in), ansible and slurm behind one interface."""
