"""Commands that work on finished runs: rescore a run with other rewards, turn ratings into preference
pairs, train a reward model from them."""
