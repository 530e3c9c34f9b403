"""Starting, queueing, stopping and resuming trainer processes, and the launch form that feeds them."""
