"""The client side: where ``execute()`` sends a job (in-process, remote cluster, or plan capture)."""
