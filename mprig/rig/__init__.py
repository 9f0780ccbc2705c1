"""Rigs: the virtual rig of network namespaces, lab inventories, SSH hosts."""
