"""Pictures and tables of a placed, measured training step: the environment's render modes.

* :mod:`placement_env.render.gantt`: the simulated :class:`~placement_env.schedule.Schedule` of a
  Measurement as a Gantt chart (an RGB array, a PNG file or a matplotlib Figure), drawn exactly as
  the simulator recorded it; a measurement without a schedule gives a text panel saying why.
* :mod:`placement_env.render.table`: the text form, one line per device.
* :mod:`placement_env.render.units`: how both write bytes, seconds and percentages.
"""
