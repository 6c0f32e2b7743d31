"""Serving the exported model: model repository, client, server, scoring."""
