#!/usr/bin/env python3
"""tfevents_dump.py: print the scalars of a TensorBoard event file, one line each, in file order:

    tag<TAB>step<TAB>value        (value is Python's repr of the float TensorBoard would show)

The file's TFRecord framing is checked here first (every length and data CRC-32C, masked), then the
records are parsed by a real protobuf parser:
  - TensorBoard (EventFileLoader, which reads the file itself and turns simple_value into a
    "scalars" tensor, as its scalar dashboard sees it), when `tensorboard` imports;
  - else Debian's python3-protobuf (google.protobuf), with Event/Summary built here from a
    FileDescriptorProto carrying the field numbers of tensorboard/compat/proto/event.proto and
    summary.proto.
The parser used is said on stderr.

usage: tfevents_dump.py [--parser auto|tensorboard|protobuf] [--require-tensorboard] FILE
  --require-tensorboard is --parser tensorboard.
exit: 0 printed; 1 a bad file (the reason on stderr); 2 usage; 77 the parser asked for (or, with
auto, any parser) cannot be imported (the reason on stderr).
"""
import argparse
import struct
import sys

SKIP = 77


def _crc_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
        table.append(c)
    return table


_TABLE = _crc_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = _TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked(crc):
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


class BadFile(Exception):
    pass


def read_records(path):
    """The data of every record, after checking its framing."""
    with open(path, "rb") as f:
        buf = f.read()
    out, off = [], 0
    while off < len(buf):
        n = len(out)
        if len(buf) - off < 12:
            raise BadFile(f"record {n} at byte {off}: {len(buf) - off} bytes left, a header needs 12")
        header = buf[off:off + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", buf[off + 8:off + 12])
        if length_crc != masked(crc32c(header)):
            raise BadFile(f"record {n} at byte {off}: the length's CRC is 0x{length_crc:08x}, "
                          f"0x{masked(crc32c(header)):08x} expected")
        if len(buf) - off - 12 < length + 4:
            raise BadFile(f"record {n} at byte {off}: length {length} runs past the end of the file")
        data = buf[off + 12:off + 12 + length]
        (data_crc,) = struct.unpack("<I", buf[off + 12 + length:off + 16 + length])
        if data_crc != masked(crc32c(data)):
            raise BadFile(f"record {n} at byte {off}: the data's CRC is 0x{data_crc:08x}, "
                          f"0x{masked(crc32c(data)):08x} expected")
        out.append(data)
        off += 16 + length
    if not out:
        raise BadFile("no records")
    return out


def check_version(first):
    if not first.startswith("brain.Event:"):
        raise BadFile(f"the first event's file_version is {first!r}, not brain.Event:*")


# --- TensorBoard ----------------------------------------------------------------------------------
def scalars_tensorboard(path, n_records):
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.compat.proto import summary_pb2
    from tensorboard.util import tensor_util
    import tensorboard

    print(f"tfevents_dump: parser: tensorboard {tensorboard.__version__} (EventFileLoader)", file=sys.stderr)
    events = list(EventFileLoader(path).Load())
    if len(events) != n_records:
        raise BadFile(f"TensorBoard loaded {len(events)} events from {n_records} records")
    check_version(events[0].file_version)
    plugin = {}  # tag -> SummaryMetadata of its first value (TensorBoard keeps that one)
    out = []
    for ev in events[1:]:
        if ev.WhichOneof("what") != "summary":
            raise BadFile(f"step {ev.step}: an event without a summary ({ev.WhichOneof('what')})")
        for v in ev.summary.value:
            if v.HasField("metadata"):
                plugin.setdefault(v.tag, v.metadata)
            kind = v.WhichOneof("value")
            if kind == "simple_value":  # a TensorBoard without the data_compat migration
                out.append((v.tag, ev.step, v.simple_value))
                continue
            md = plugin.get(v.tag)
            if kind != "tensor" or md is None or md.plugin_data.plugin_name != "scalars" or \
                    md.data_class != summary_pb2.DATA_CLASS_SCALAR:
                raise BadFile(f"tag {v.tag!r} step {ev.step}: TensorBoard does not read it as a scalar "
                              f"({kind}, plugin {md.plugin_data.plugin_name if md else None!r})")
            out.append((v.tag, ev.step, tensor_util.make_ndarray(v.tensor).item()))
    return out


# --- protobuf with the messages defined here -------------------------------------------------------
def event_class():
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    import google.protobuf

    F = descriptor_pb2.FieldDescriptorProto
    pkg = "dtrain_tfevents"
    fdp = descriptor_pb2.FileDescriptorProto(name="dtrain_tfevents.proto", package=pkg, syntax="proto3")
    ev = fdp.message_type.add(name="Event")
    ev.oneof_decl.add(name="what")
    ev.field.add(name="wall_time", number=1, type=F.TYPE_DOUBLE, label=F.LABEL_OPTIONAL)
    ev.field.add(name="step", number=2, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    ev.field.add(name="file_version", number=3, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL, oneof_index=0)
    ev.field.add(name="summary", number=5, type=F.TYPE_MESSAGE, type_name=f".{pkg}.Summary",
                 label=F.LABEL_OPTIONAL, oneof_index=0)
    sm = fdp.message_type.add(name="Summary")
    val = sm.nested_type.add(name="Value")
    val.oneof_decl.add(name="value")
    val.field.add(name="tag", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    val.field.add(name="simple_value", number=2, type=F.TYPE_FLOAT, label=F.LABEL_OPTIONAL, oneof_index=0)
    sm.field.add(name="value", number=1, type=F.TYPE_MESSAGE, type_name=f".{pkg}.Summary.Value",
                 label=F.LABEL_REPEATED)

    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(fdp.SerializeToString())
    desc = pool.FindMessageTypeByName(f"{pkg}.Event")
    if hasattr(message_factory, "GetMessageClass"):  # protobuf >= 4.22 (Python)
        cls = message_factory.GetMessageClass(desc)
        how = "GetMessageClass"
    else:  # Debian 12's 3.21.12 (Python 4.21.12)
        cls = message_factory.MessageFactory(pool).GetPrototype(desc)
        how = "MessageFactory.GetPrototype"
    print(f"tfevents_dump: parser: protobuf {google.protobuf.__version__} (Event built from a descriptor, {how})",
          file=sys.stderr)
    return cls


def scalars_protobuf(records):
    Event = event_class()
    events = []
    for i, data in enumerate(records):
        ev = Event()
        try:
            ev.ParseFromString(data)
        except Exception as e:  # google.protobuf.message.DecodeError, by implementation
            raise BadFile(f"record {i}: not an Event: {e}")
        events.append(ev)
    check_version(events[0].file_version)
    out = []
    for ev in events[1:]:
        if ev.WhichOneof("what") != "summary":
            raise BadFile(f"step {ev.step}: an event without a summary ({ev.WhichOneof('what')})")
        for v in ev.summary.value:
            if v.WhichOneof("value") != "simple_value":
                raise BadFile(f"tag {v.tag!r} step {ev.step}: no simple_value")
            out.append((v.tag, ev.step, v.simple_value))
    return out


def main():
    ap = argparse.ArgumentParser(description="Print the scalars of a TensorBoard event file.")
    ap.add_argument("--parser", choices=("auto", "tensorboard", "protobuf"), default="auto")
    ap.add_argument("--require-tensorboard", action="store_true", help="the same as --parser tensorboard")
    ap.add_argument("file")
    a = ap.parse_args()
    parser = "tensorboard" if a.require_tensorboard else a.parser

    try:
        records = read_records(a.file)
    except (OSError, BadFile) as e:
        print(f"tfevents_dump: {a.file}: {e}", file=sys.stderr)
        return 1

    use, why = None, []
    if parser in ("auto", "tensorboard"):
        try:
            import tensorboard.backend.event_processing.event_file_loader  # noqa: F401
            import tensorboard.util.tensor_util  # noqa: F401
            use = "tensorboard"
        except ImportError as e:
            why.append(f"tensorboard: {e}")
    if use is None and parser in ("auto", "protobuf"):
        try:
            import google.protobuf.descriptor_pb2  # noqa: F401
            import google.protobuf.message_factory  # noqa: F401
            use = "protobuf"
        except ImportError as e:
            why.append(f"google.protobuf (Debian: python3-protobuf): {e}")
    if use is None:
        print(f"tfevents_dump: no parser ({sys.executable}): " + "; ".join(why), file=sys.stderr)
        return SKIP

    try:
        rows = scalars_tensorboard(a.file, len(records)) if use == "tensorboard" else scalars_protobuf(records)
    except BadFile as e:
        print(f"tfevents_dump: {a.file}: {e}", file=sys.stderr)
        return 1
    for tag, step, value in rows:
        print(f"{tag}\t{step}\t{float(value)!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
