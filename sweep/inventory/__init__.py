"""Hosts and their settings: Ansible inventories (YAML, INI), their variables and
--limit patterns."""
