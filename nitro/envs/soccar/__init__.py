"""Rocket League soccar: a batched port of RocketSim's physics, checked against the real RocketSim."""
