"""What the training pages draw: each page's body, its charts, tables and coloured text."""
