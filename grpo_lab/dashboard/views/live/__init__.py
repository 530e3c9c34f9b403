"""The Live page: curves of a run as it trains, the link from a curve to Groups, the loss note."""
