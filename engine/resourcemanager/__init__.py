"""The ResourceManager: which TaskManagers are alive and which of their slots are taken."""
