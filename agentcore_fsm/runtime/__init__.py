"""The runtime: the async driver that performs the machine's effects, the public run functions,
resume, and the ports integrations implement (run observers, journals)."""
