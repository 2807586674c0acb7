"""Deploying trained soccar policies to Rocket League through RLBot v5: ``nitro export RUN --rlbot DIR``
(`export.export_rlbot`) writes a bot folder whose runtime (`runtime`) turns each GamePacket into the
state the policy was trained on and runs the policy graph (`graph`). See docs/RLBOT.md."""
