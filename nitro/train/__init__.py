"""PPO on the accelerator: config, policies, rollouts, the trainer and its commands."""
