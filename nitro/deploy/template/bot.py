"""$name: a Rocket League bot for RLBot v5, exported by nitro (`nitro export RUN --rlbot DIR`).

RLBot starts it with ``python bot.py`` in this folder. Each tick `get_output` hands the GamePacket to
nitro_runtime.Agent, which rebuilds the state the policy was trained on, runs policy.onnx on the
ticks the policy acts and returns the car's controls. See README.md.
"""

from pathlib import Path

from rlbot import flat
from rlbot.managers import Bot

from nitro_runtime import Agent  # this folder's runtime


class NitroBot(Bot):
    agent: Agent

    def initialize(self):
        pads = [(pad.location.x, pad.location.y) for pad in self.field_info.boost_pads]
        self.agent = Agent(Path(__file__).resolve().parent, pads, self.index)

    def get_output(self, packet: flat.GamePacket) -> flat.ControllerState:
        throttle, steer, pitch, yaw, roll, jump, boost, handbrake = self.agent.step(packet).tolist()
        return flat.ControllerState(throttle=throttle, steer=steer, pitch=pitch, yaw=yaw, roll=roll,
                                    jump=jump > 0.5, boost=boost > 0.5, handbrake=handbrake > 0.5)


if __name__ == "__main__":
    NitroBot("$agent_id").run()
