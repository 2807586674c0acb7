"""The RL layer over the soccar arena: observation builders, action parsers, rewards, done
conditions, state mutators and the batched multi-agent env, with RLGym v2's and GigaLearnCPP's
layouts and semantics."""
