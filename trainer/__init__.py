"""The TF-GNN config-ranking model, its training loop and its export."""
