"""Built-in envs, registered by id (entry points are imported on first use)."""

from nitro.core.registry import register

register("CartPole-v1", "nitro.envs.classic.cartpole:CartPole", aliases=("cartpole",))
register("MountainCar-v0", "nitro.envs.classic.mountain_car:MountainCar", aliases=("mountaincar",))
register("MountainCarContinuous-v0", "nitro.envs.classic.continuous_mountain_car:Continuous_MountainCar",
         aliases=("mountaincarcontinuous",))
register("Pendulum-v1", "nitro.envs.classic.pendulum:Pendulum", aliases=("pendulum",))
register("Acrobot-v1", "nitro.envs.classic.acrobot:Acrobot", aliases=("acrobot",))
register("ConnectFour-v3", "nitro.envs.connect_four:ConnectFour", aliases=("connect_four", "connect4"))
register("SkullKing-v0", "nitro.envs.skullking.env:SkullKing", aliases=("skullking",))
register("Soccar-v0", "nitro.envs.soccar.rl.env:Soccar", aliases=("soccar",))
