"""The env's modes as strategy objects, one class each, selected once when the env is made.

A :class:`Mode` decides what differs between modes and nothing else: the observation fields it adds, the action
space and the shape of an action, how ``reset`` starts an episode and ``step`` advances it, and the action masks.
The env (:mod:`.core`) keeps what every mode shares: the graphs, evaluation, rewards, infos, render and export.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from gymnasium import spaces

from ..errors import ArgumentError, InvalidActionError

if TYPE_CHECKING:
    from .core import DevicePlacementEnv


class Mode:
    """One mode of ``DevicePlacementEnv`` (see the env's docstring for what each does)."""

    name = ""

    def observation_fields(self, slots: int, n_devices: int) -> dict[str, spaces.Box]:
        """The fields this mode adds to the graph's features."""
        return {}

    def action_space(self, slots: int, n_devices: int) -> spaces.Space:
        raise NotImplementedError

    def action(self, array: np.ndarray, slots: int) -> Any:
        """``array`` (integers, devices in range) as this mode's action, or InvalidActionError for its shape."""
        raise NotImplementedError

    def check_reset_options(self, options: dict[str, Any]) -> None:
        """Refuse the reset options this mode has no use for."""
        if "placement" in options:
            raise ArgumentError(f"reset option 'placement' (a start placement) is for mode='improve', "
                                f"not {self.name!r}")

    def reset(self, env: DevicePlacementEnv, options: dict[str, Any], info: dict[str, Any]) -> None:
        """Start an episode: ``env``'s placement is all zeros and its step 0; add to ``info`` what the start
        measured."""

    def step(self, env: DevicePlacementEnv, action: Any) -> tuple:
        """Take ``action`` (checked by :meth:`action`); the step's (observation, reward, terminated, truncated,
        info)."""
        raise NotImplementedError

    def observe(self, env: DevicePlacementEnv, obs: dict[str, np.ndarray]) -> None:
        """Add this mode's fields to ``obs``."""

    def action_masks(self, env: DevicePlacementEnv) -> np.ndarray:
        raise NotImplementedError


class OneShot(Mode):
    """The paper's mode: a device for every group slot in one step."""

    name = "oneshot"

    def action_space(self, slots: int, n_devices: int) -> spaces.Space:
        return spaces.MultiDiscrete(np.full(slots, n_devices, dtype=np.int64))

    def action(self, array: np.ndarray, slots: int) -> Any:
        if array.shape != (slots,):
            raise InvalidActionError(f"action has shape {array.shape}; expected ({slots},): one device per group slot")
        return array.astype(np.int64)

    def step(self, env: DevicePlacementEnv, action: Any) -> tuple:
        env._placement[:] = action
        return env._finish(env._evaluate(env._placement[: env.n_groups]))

    def action_masks(self, env: DevicePlacementEnv) -> np.ndarray:
        mask = np.zeros((env.slots, env.cluster.n_devices), bool)
        mask[: env.n_groups] = env.allowed
        mask[env.n_groups:, 0] = True
        return mask.reshape(-1)


class _OneGroupPerStep(Mode):
    """What sequential and improve share: one group per step in topological order, its device the action."""

    def observation_fields(self, slots: int, n_devices: int) -> dict[str, spaces.Box]:
        return {"placement": spaces.Box(0.0, 1.0, (slots, n_devices), np.float32),
                "current": spaces.Box(0.0, 1.0, (slots,), np.float32)}

    def action_space(self, slots: int, n_devices: int) -> spaces.Space:
        return spaces.Discrete(n_devices)

    def action(self, array: np.ndarray, slots: int) -> Any:
        if array.shape not in ((), (1,)):
            raise InvalidActionError(f"action has shape {array.shape}; expected a single device index")
        return int(array.reshape(()))

    def _decided(self, env: DevicePlacementEnv) -> int:
        """How many groups (from the first) the ``placement`` field shows."""
        return env.n_groups

    def observe(self, env: DevicePlacementEnv, obs: dict[str, np.ndarray]) -> None:
        placement = np.zeros((env.slots, env.cluster.n_devices), np.float32)
        decided = self._decided(env)
        placement[np.arange(decided), env._placement[:decided]] = 1.0
        current = np.zeros(env.slots, np.float32)
        if not env._done:
            current[env._current_group()] = 1.0
        obs["placement"], obs["current"] = placement, current

    def _place(self, env: DevicePlacementEnv, action: int) -> None:
        env._placement[env._current_group()] = action
        env._step += 1

    def action_masks(self, env: DevicePlacementEnv) -> np.ndarray:
        if env._done:
            return np.ones(env.cluster.n_devices, bool)
        return env.allowed[env._current_group()].copy()


class Sequential(_OneGroupPerStep):
    """One group per step; the reward at the end, or with ``dense_reward`` the change in reward of "decided groups
    + the rest at the reference placement" after every step."""

    name = "sequential"

    def __init__(self, dense_reward: bool = False) -> None:
        self.dense_reward = dense_reward

    def _decided(self, env: DevicePlacementEnv) -> int:
        return min(env._step, env.n_groups)

    def reset(self, env: DevicePlacementEnv, options: dict[str, Any], info: dict[str, Any]) -> None:
        if self.dense_reward:
            placement, measurement = env.reference()
            env._placement[: env.n_groups] = placement
            env._baseline = measurement

    def step(self, env: DevicePlacementEnv, action: Any) -> tuple:
        self._place(env, action)
        n = env.n_groups
        if env._step == n:
            return env._finish(env._evaluate(env._placement[:n]), baseline=self.dense_reward)
        reward = 0.0
        if self.dense_reward:
            measurement = env._evaluate(env._placement[:n])
            reward = env._reward_of(measurement) - env._reward_of(env._baseline)
            env._baseline = measurement
        return env._observation(), reward, False, False, {"groups_placed": env._step}


class Improve(_OneGroupPerStep):
    """Placeto-style: start from a placement (default: the reference) and move one group per step, in
    topological order, ``improve_steps`` steps (default one pass); the reward is the change in reward."""

    name = "improve"

    def __init__(self, improve_steps: int | None = None) -> None:
        self.improve_steps = improve_steps

    def observation_fields(self, slots: int, n_devices: int) -> dict[str, spaces.Box]:
        return {**super().observation_fields(slots, n_devices),
                "efficiency": spaces.Box(0.0, 1.0, (1,), np.float32)}

    def check_reset_options(self, options: dict[str, Any]) -> None:
        pass  # a start placement is what improve takes

    def reset(self, env: DevicePlacementEnv, options: dict[str, Any], info: dict[str, Any]) -> None:
        start = options.get("placement")
        start = env.reference()[0] if start is None else env._check_placement(start)
        env._placement[: env.n_groups] = start
        measurement = env._evaluate(env._placement[: env.n_groups])
        env._baseline = env._last = measurement
        info.update(env._info(measurement))

    def step(self, env: DevicePlacementEnv, action: Any) -> tuple:
        self._place(env, action)
        n = env.n_groups
        return env._finish(env._evaluate(env._placement[:n]), baseline=True,
                           done=env._step >= (self.improve_steps or n))

    def observe(self, env: DevicePlacementEnv, obs: dict[str, np.ndarray]) -> None:
        super().observe(env, obs)
        obs["efficiency"] = np.array([env._efficiency()], np.float32)


def make_mode(mode: str, *, dense_reward: bool = False, improve_steps: int | None = None) -> Mode:
    """The strategy of ``mode`` (checked by :func:`.checks.check_mode`) with its keywords."""
    if mode == "oneshot":
        return OneShot()
    if mode == "sequential":
        return Sequential(dense_reward)
    return Improve(improve_steps)
