"""The kernel's data names the state it was computed for (issue 32: the browser never paints the kernel's answer for
a state the student has left): every message of a browser picture that carries its data (BrowserPicture.show,
show_options, show_error) carries, in the same message, `data_key`, the browser's key of the app's controls then
(prefetch.state_key, the key the browser's cache uses); browser_js/prefetch.js paints the data only while its
controls show that key (tests/widgets/test_prefetch_js_stale.py)."""

from __future__ import annotations

from distlab.widgets.browser import BarsPicture
from distlab.widgets.memory_wall import MemoryWallApp
from distlab.widgets.prefetch import state_key
from distlab.widgets.training_lab import TrainingLabApp

DATA = {"summaries", "errors", "frames"}


def _record(picture) -> list:
    """From now on, for each message of `picture` to the browser that carries its data: the data_key the browser's
    copy of the model holds after it (the messages applied one after another) and the key of the controls then."""
    copy = {"data_key": getattr(picture, "data_key", None)}
    seen: list = []
    original = picture.send_state

    def send_state(key=None):
        names = [key] if isinstance(key, str) else list(key or picture.keys)
        copy.update({name: getattr(picture, name) for name in names})
        if DATA & set(names):
            seen.append((copy["data_key"], state_key(picture.controls)))
        return original(key)

    picture.send_state = send_state
    return seen


def test_every_message_with_a_pictures_data_names_the_state_it_was_computed_for():
    app = TrainingLabApp()
    seen = _record(app.picture)
    app.seq_len.value = 16384  # 8192's neighbour
    assert seen, "the change sent the new data"
    # before: no data_key (the picture had no such trait)
    assert all(have == want for have, want in seen), seen
    assert seen[-1][1].split("\x1f")[4] == "16384"  # the fifth control is the sequence length: its new label
    app.close()


def test_our_message_at_an_invalid_state_names_its_state_too():
    app = MemoryWallApp(model="llama2-7b", gpus=8, zero=0)
    seen = _record(app.picture)
    app.zero.value = 3
    app.picture.show_error("a message")
    assert len(seen) >= 2 and all(have == want for have, want in seen), seen
    app.close()


def test_a_picture_without_controls_names_no_state():
    picture = BarsPicture()  # no app's controls: the browser paints its data as it comes
    picture.show_options([1, 2], ["one", "two"])
    assert picture.data_key == ""
