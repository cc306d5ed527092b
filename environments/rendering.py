"""Colour palettes and episode-to-image helpers for the BoxWorld environments.

NumPy only; Pillow is imported lazily, and only by `save_episode`.

Example:

```python
from keras_relational.environments import BoxWorld, rendering

env = BoxWorld(seed=0)
frames = rendering.record_episode(env, policy=lambda timestep: 3, max_steps=20)
rendering.save_episode(frames, "/tmp/boxworld.gif", scale=16)   # or a .png contact sheet
```
"""

import colorsys
import os

import numpy as np


def hsv_palette(num_colors, saturation, value):
    """`num_colors` RGB colours, hue `360 * k / num_colors` degrees, as uint8 `[num_colors, 3]`.

    With 20 colours the hue step is 18 degrees, the palette of both BoxWorld papers; each channel
    is `round(255 * c)` (Clift et al. 2020, released code).
    """
    colors = [colorsys.hsv_to_rgb(k / num_colors, saturation, value) for k in range(num_colors)]
    return np.array([[round(255 * c) for c in rgb] for rgb in colors], dtype=np.uint8)


def upscale(frame, scale):
    """Nearest-neighbour upscaling of `[..., H, W, 3]` frames by an integer `scale`."""
    if int(scale) != scale or scale < 1:
        raise ValueError(f"`scale`: expected an integer >= 1, received {scale!r}.")
    scale = int(scale)
    frame = np.asarray(frame)
    return np.repeat(np.repeat(frame, scale, axis=-3), scale, axis=-2)


def record_episode(env, policy, max_steps=1000):
    """Plays one episode of a single (unbatched) env and returns its RGB frames.

    Args:
      env: a `BoxWorld` or `BridgeBoxWorld` (anything with `reset`, `step` and `render`).
      policy: a callable `timestep -> action`.
      max_steps: stop after this many actions even if the episode has not ended.

    Returns:
      A list of uint8 `[H, W, 3]` frames, the first after `reset()` and one per action.
    """
    timestep = env.reset()
    frames = [env.render()]
    for _ in range(max_steps):
        timestep = env.step(policy(timestep))
        frames.append(env.render())
        if timestep.last():
            break
    return frames


def _contact_sheet(frames, columns, gap=1):
    frames = np.asarray(frames)
    count, height, width, channels = frames.shape
    columns = max(1, min(columns, count))
    rows = -(-count // columns)
    sheet = np.full(
        (rows * (height + gap) - gap, columns * (width + gap) - gap, channels), 255, np.uint8)
    for index, frame in enumerate(frames):
        row, column = divmod(index, columns)
        top, left = row * (height + gap), column * (width + gap)
        sheet[top:top + height, left:left + width] = frame
    return sheet


def save_episode(frames, path, scale=16, fps=8, columns=8):
    """Writes frames to an animated GIF (`.gif`) or a PNG contact sheet (`.png`).

    Args:
      frames: a sequence of uint8 `[H, W, 3]` frames (e.g. from `record_episode`) or one frame.
      path: output file name; its suffix (`.gif` or `.png`) selects the format.
      scale: integer nearest-neighbour upscaling (one BoxWorld cell is one pixel).
      fps: GIF frame rate.
      columns: frames per row of the PNG contact sheet.

    Returns:
      `path`.
    """
    from PIL import Image  # Pillow is an optional dependency (the `envs` extra).

    frames = np.asarray(frames, dtype=np.uint8)
    if frames.ndim == 3:
        frames = frames[None]
    if frames.ndim != 4 or frames.shape[-1] != 3 or len(frames) == 0:
        raise ValueError(
            f"`frames`: expected a non-empty sequence of [H, W, 3] uint8 frames, received an "
            f"array of shape {frames.shape}.")
    suffix = os.path.splitext(str(path))[1].lower()
    if suffix == ".gif":
        images = [Image.fromarray(frame) for frame in upscale(frames, scale)]
        images[0].save(path, save_all=True, append_images=images[1:],
                       duration=max(1, round(1000 / fps)), loop=0)
    elif suffix == ".png":
        Image.fromarray(upscale(_contact_sheet(frames, columns), scale)).save(path)
    else:
        raise ValueError(f"`path`: expected a '.gif' or '.png' file name, received {path!r}.")
    return path
