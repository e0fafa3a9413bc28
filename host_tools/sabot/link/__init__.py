"""The host end of a shoe's port: transport, the host link, operating a shoe."""
