"""The turn engine every chat protocol runs on: a request served in a task of its own, the
provider's reply relayed byte for byte, and one place that decides how the turn ends."""
