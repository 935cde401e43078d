#!/usr/bin/env python3
"""Reads a run's TensorBoard event files with an independent decoder and checks them against
its metrics.jsonl: every record's two CRC32Cs (computed bit by bit here), the Event/Summary
encoding (parsed by python3-protobuf from a schema written below, and re-serialised to the
same bytes), one event per step over all files, and every value equal to metrics.jsonl's.

Usage: tensorboard_events.py RUN_DIR [--files-steps 1-4,5-8]  (the steps each file holds)
Exit status 0 when every check passes, 1 with the failures listed otherwise.
"""
import argparse
import glob
import json
import os
import struct
import sys

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

F = descriptor_pb2.FieldDescriptorProto


def event_class():
    """tensorflow/core/util/event.proto's Event and summary.proto's Summary, the fields a
    scalar event file uses, with their numbers and oneofs as TensorFlow declares them."""
    proto = descriptor_pb2.FileDescriptorProto(name="tb_scalars_test.proto", package="tbtest",
                                               syntax="proto3")
    summary = proto.message_type.add(name="Summary")
    value = summary.nested_type.add(name="Value")
    value.oneof_decl.add(name="value")
    value.field.add(name="tag", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    value.field.add(name="simple_value", number=2, type=F.TYPE_FLOAT, label=F.LABEL_OPTIONAL,
                    oneof_index=0)
    summary.field.add(name="value", number=1, type=F.TYPE_MESSAGE, label=F.LABEL_REPEATED,
                      type_name=".tbtest.Summary.Value")
    event = proto.message_type.add(name="Event")
    event.oneof_decl.add(name="what")
    event.field.add(name="wall_time", number=1, type=F.TYPE_DOUBLE, label=F.LABEL_OPTIONAL)
    event.field.add(name="step", number=2, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    event.field.add(name="file_version", number=3, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL,
                    oneof_index=0)
    event.field.add(name="summary", number=5, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL,
                    type_name=".tbtest.Summary", oneof_index=0)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    descriptor = pool.FindMessageTypeByName("tbtest.Event")
    if hasattr(message_factory, "GetMessageClass"):
        return message_factory.GetMessageClass(descriptor)
    return message_factory.MessageFactory(pool).GetPrototype(descriptor)


def crc32c(data):
    """CRC-32C bit by bit (reflected Castagnoli polynomial), no table."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked(crc):
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def records(path, failures):
    data = open(path, "rb").read()
    at, found = 0, []
    while at < len(data):
        if len(data) - at < 12:
            failures.append(f"{path}: {len(data) - at} stray bytes at the end")
            break
        length_bytes = data[at:at + 8]
        (length,) = struct.unpack("<Q", length_bytes)
        (length_crc,) = struct.unpack("<I", data[at + 8:at + 12])
        if length_crc != masked(crc32c(length_bytes)):
            failures.append(f"{path}: record {len(found)}: the length's CRC does not match")
            break
        payload = data[at + 12:at + 12 + length]
        if len(payload) != length or len(data) < at + 16 + length:
            failures.append(f"{path}: record {len(found)}: truncated")
            break
        (data_crc,) = struct.unpack("<I", data[at + 12 + length:at + 16 + length])
        if data_crc != masked(crc32c(payload)):
            failures.append(f"{path}: record {len(found)}: the data's CRC does not match")
            break
        found.append(payload)
        at += 16 + length
    return found


def metrics_key(tag):
    """The metrics.jsonl key a tag carries, and whether metrics.jsonl prints it with only 6
    significant digits (timing values) rather than 9 or as an integer."""
    six_digits = {"tokens_per_s", "step_ms", "grad_reduce_wait_ms", "grad_reduce_in_backward_ms",
                  "mfu_percent", "hfu_percent"}
    named = {"comm/bytes": "comm_bytes", "comm/predicted_bytes": "predicted_comm_bytes",
             "val/loss": "val_loss"}
    if tag in named:
        key = named[tag]
    elif tag.startswith("train/"):
        key = tag[len("train/"):]
    elif tag.startswith("memory/predicted_"):  # memory/predicted_<c>_peak_bytes
        key = tag[len("memory/"):]
    elif tag.startswith("memory/") and tag.endswith("_peak_bytes"):  # memory/<c>_peak_bytes
        key = "peak_" + tag[len("memory/"):-len("_peak_bytes")] + "_bytes"
    else:
        return None, False
    return key, key in six_digits


def as_float32(value):
    return struct.unpack("<f", struct.pack("<f", value))[0]


def parse_ranges(text):
    ranges = []
    for part in text.split(","):
        first, last = part.split("-")
        ranges.append(list(range(int(first), int(last) + 1)))
    return ranges


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("run_dir")
    parser.add_argument("--files-steps", help="the steps of each event file, e.g. 1-4,5-8")
    args = parser.parse_args()
    Event = event_class()
    failures = []
    files = sorted(glob.glob(os.path.join(args.run_dir, "tensorboard", "events.out.tfevents.*")))
    if not files:
        failures.append("no event files under " + os.path.join(args.run_dir, "tensorboard"))
    by_step, file_steps, values_checked = {}, [], 0
    for path in files:
        steps = []
        for index, payload in enumerate(records(path, failures)):
            event = Event()
            event.ParseFromString(payload)
            if event.SerializeToString() != payload:
                failures.append(f"{path}: record {index} re-serialises to other bytes")
            if index == 0:
                if event.WhichOneof("what") != "file_version" or \
                        event.file_version != "brain.Event:2" or event.step != 0:
                    failures.append(f"{path}: the first record is not file_version brain.Event:2")
                continue
            if event.WhichOneof("what") != "summary":
                failures.append(f"{path}: record {index} holds no summary")
                continue
            if event.step in by_step:
                failures.append(f"step {event.step} written twice ({path})")
            by_step[event.step] = {v.tag: v.simple_value for v in event.summary.value}
            steps.append(event.step)
        file_steps.append(steps)
    if args.files_steps and file_steps != parse_ranges(args.files_steps):
        failures.append(f"files hold steps {file_steps}, expected {parse_ranges(args.files_steps)}")

    metrics = [json.loads(line) for line in open(os.path.join(args.run_dir, "metrics.jsonl"))]
    if sorted(by_step) != [m["step"] for m in metrics]:
        failures.append(f"event steps {sorted(by_step)} != metrics.jsonl steps "
                        f"{[m['step'] for m in metrics]}")
    for line in metrics:
        tags = by_step.get(line["step"], {})
        for tag, value in tags.items():
            key, six_digits = metrics_key(tag)
            if key not in line:
                failures.append(f"step {line['step']}: {tag} has no metrics.jsonl key {key}")
                continue
            # An integer must be its float32 exactly; a number metrics.jsonl prints with 9 (or
            # 6) significant digits must be the float32 of a value within that precision.
            number = line[key]
            if isinstance(number, int) and not six_digits:
                close = value == as_float32(float(number))
            else:
                printed = 5e-6 if six_digits else 5e-9
                close = abs(value - number) <= (printed + 2.0 ** -24) * abs(number)
            if not close:
                failures.append(f"step {line['step']}: {tag} = {value!r}, metrics.jsonl {key} = "
                                f"{number!r}")
            values_checked += 1
        required = {"train/loss", "train/lr", "train/grad_norm", "train/tokens_per_s",
                    "train/step_ms", "train/mfu_percent", "train/hfu_percent",
                    "train/recompute_share", "train/grad_reduce_wait_ms",
                    "train/grad_reduce_in_backward_ms", "comm/bytes", "comm/predicted_bytes"}
        for key in line:  # every memory category metrics.jsonl has, measured and predicted
            if key.startswith("peak_") and key.endswith("_bytes"):
                category = key[len("peak_"):-len("_bytes")]
                required |= {f"memory/{category}_peak_bytes",
                             f"memory/predicted_{category}_peak_bytes"}
        if "val_loss" in line:
            required.add("val/loss")
        missing = sorted(required - set(tags))
        if missing:
            failures.append(f"step {line['step']}: tags missing: {missing}")
        extra = sorted(set(tags) - required)
        if extra:
            failures.append(f"step {line['step']}: tags not expected: {extra}")

    if failures:
        print("\n".join("FAIL: " + f for f in failures))
        return 1
    print(f"{len(files)} event files, steps {file_steps}, {values_checked} values equal to "
          f"metrics.jsonl, every CRC valid")
    return 0


if __name__ == "__main__":
    sys.exit(main())
