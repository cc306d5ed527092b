"""What training code needs from TensorFlow, for machines without it (e.g. JAX on a GPU).

* ``tensorflow_installed()``: whether TensorFlow can be imported here (``model.export`` writes a
  SavedModel through it under every Keras backend).
* ``ScalarWriter``: TensorBoard scalars without TensorFlow. TensorBoard reads
  ``events.out.tfevents.*`` files: TFRecords (length, masked CRC-32C of the length, data, masked
  CRC-32C of the data) of ``Event`` protocol buffers. Scalars need only a few fields of them,
  encoded here by hand, so the compiled loop and the Relations Game trainer write summaries
  under JAX on machines without TensorFlow (and the same files with it;
  ``tf.compat.v1.train.summary_iterator`` and TensorBoard read them).
"""

import importlib.util
import os
import socket
import struct
import time


def tensorflow_installed():
    """Whether TensorFlow is importable in this Python (without importing it)."""
    try:
        return importlib.util.find_spec("tensorflow") is not None
    except (ImportError, ValueError):  # a parent that fails to import; a None in sys.modules
        return False


# What a trainer says (prints, records) when it skips ``model.export`` for want of TensorFlow.
SAVED_MODEL_SKIPPED = ("model.export skipped: it writes a SavedModel, which needs TensorFlow "
                       "(not installed)")

_CRC32C_TABLE = []
for _byte in range(256):
    _crc = _byte
    for _ in range(8):
        _crc = (_crc >> 1) ^ 0x82F63B78 if _crc & 1 else _crc >> 1  # Castagnoli polynomial
    _CRC32C_TABLE.append(_crc)


def crc32c(data):
    """CRC-32C (Castagnoli) of ``data`` bytes."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _CRC32C_TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _masked_crc(data):
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _varint(value):
    out = bytearray()
    while True:
        bits, value = value & 0x7F, value >> 7
        out.append(bits | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number, wire_type, payload):
    key = _varint(number << 3 | wire_type)
    if wire_type == 2:  # length-delimited
        return key + _varint(len(payload)) + payload
    return key + payload


def _event(wall_time, step, file_version=None, scalars=()):
    """An ``Event`` proto: wall_time (1), step (2), file_version (3) or summary (5)."""
    data = _field(1, 1, struct.pack("<d", wall_time)) + _field(2, 0, _varint(step))
    if file_version is not None:
        data += _field(3, 2, file_version.encode())
    if scalars:
        # Summary.value (1): Value.tag (1), Value.simple_value (2, float).
        values = b"".join(_field(1, 2, _field(1, 2, tag.encode()) +
                                 _field(2, 5, struct.pack("<f", value)))
                          for tag, value in scalars)
        data += _field(5, 2, values)
    return data


class ScalarWriter:
    """Appends scalar summaries to a new event file in ``logdir``.

    Example::

        writer = ScalarWriter("/tmp/run/train")
        writer.scalars(10, {"loss": 0.5, "frames_per_second": 1234.0})
        writer.close()
    """

    def __init__(self, logdir):
        os.makedirs(logdir, exist_ok=True)
        now = time.time()
        self.path = os.path.join(
            logdir, f"events.out.tfevents.{int(now)}.{socket.gethostname()}.{os.getpid()}")
        self._file = open(self.path, "ab")  # noqa: SIM115  (closed by close())
        self._write(_event(now, 0, file_version="brain.Event:2"))

    def _write(self, data):
        header = struct.pack("<Q", len(data))
        self._file.write(header + struct.pack("<I", _masked_crc(header)) + data +
                         struct.pack("<I", _masked_crc(data)))

    def scalars(self, step, values):
        """Writes ``{tag: float}`` at ``step`` and flushes."""
        self._write(_event(time.time(), int(step),
                           scalars=[(tag, float(value)) for tag, value in values.items()]))
        self._file.flush()

    def close(self):
        self._file.close()
