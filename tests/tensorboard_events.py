"""A run folder's TensorBoard event file read back with TensorBoard's own reader (tests of the kit loop, the TRL
engine and the live server)."""
from tensorboard.backend.event_processing import event_accumulator


def read_events(folder):
    """{tag: [(step, value), ...]} of the folder's event file, through TensorBoard's reader (every event kept)."""
    acc = event_accumulator.EventAccumulator(str(folder), size_guidance={event_accumulator.SCALARS: 0,
                                                                          event_accumulator.TENSORS: 0})
    acc.Reload()
    out = {tag: [(e.step, float(e.tensor_proto.float_val[0])) for e in acc.Tensors(tag)]
           for tag in acc.Tags()["tensors"]}
    out.update({tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]})
    return out
