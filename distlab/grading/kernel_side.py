"""Code that runs INSIDE the student's kernel: the grading sandbox and the answer collector.

The grader never imports this module into the kernel: it sends the source of each function
(inspect.getsource), which the kernel compiles into a private namespace, so the code is the
same as what a reader, a linter and the tests see here. install_sandbox runs the steps below
in order (SANDBOX: the functions whose source the kernel gets), each a function of its own:
preload_modules, cap_output, withhold_answer_key, limit_resources, remove_unaudited_calls, then
the audit hook (path_resolver, path_checks, event_tables, audit_hook). Hence the rules:

* each function is self-contained: it imports what it needs inside its body, and this module
  has no imports or globals the functions could rely on (install_sandbox calls the steps, all
  defined in the same private namespace, before any student code runs);
* everything the audit hook uses is bound as a default argument at definition time (C
  builtins, frozensets, tuples), so student code cannot change its behaviour by monkeypatching
  modules or builtins; the hook and its helpers read no globals and have no closures
  (tests/grading/test_kernel_side.py checks the bytecode). Setting __code__/__defaults__ of
  these functions is refused once the hook is installed.
"""


__all__ = ["install_sandbox", "collect_answers", "SANDBOX"]


def install_sandbox(roots, allowed_files, memory_limit, fsize_limit, nonce, install_hook=True,
                    secret_parts=(), withhold=True, out_limit=200_000):
    """Install the grading sandbox in this (the kernel's) process, then print the ready marker with `nonce`.

    Writes are allowed only under `roots` and to `allowed_files`; resource limits cap the address space
    and the size of written files (bytes, 0: no limit). See distlab.grading.grade for what it refuses.
    withhold: the answer key leaves the kernel: every lesson's question module is imported, its
    questions keep prompt, hint and params but expected/explain/check/solution only say that the
    grader checks, and the module's own functions (the expected values' helpers) are deleted;
    reading files whose path contains one of `secret_parts` (the lessons' sources, the solutions)
    is then refused, so the key cannot be loaded again.
    """
    import sys
    preload_modules()
    cap_output(out_limit)
    if withhold:
        withhold_answer_key()
    limit_resources(memory_limit, fsize_limit)
    remove_unaudited_calls()
    resolve = path_resolver()
    inside, relative_up, secret, is_dir_outside = path_checks(resolve, roots, allowed_files, secret_parts)
    hook = audit_hook(event_tables(), resolve, inside, is_dir_outside, relative_up, secret)
    if install_hook:
        sys.addaudithook(hook)
    print("DISTLAB-SANDBOX-READY-" + nonce)


def preload_modules():
    """Import what kernels and lessons use while writing caches and loading libraries is still allowed."""
    for name in ("ctypes", "ctypes.util", "subprocess", "numpy", "pint", "matplotlib", "matplotlib.pyplot",
                 "matplotlib.font_manager", "ipywidgets", "ipympl", "distlab", "distlab.units",
                 "distlab.lessons.questions", "distlab.lessons", "distlab.lessons.variants"):
        try:
            __import__(name)
        except Exception:
            pass
    import sys

    try:  # distlab builds its pint registry on first use: build it while loading is still allowed
        sys.modules["distlab.units"].Q_(1, "B")
    except Exception:
        pass


def cap_output(out_limit):
    """Cap what a cell prints at `out_limit` characters, on the kernel's session."""
    # what a cell prints is capped here, when it becomes a message (the grader keeps 200,000 characters per
    # cell anyway): print('y' * 10**9) costs no memory outside the kernel and loses no answers. The budget is
    # refilled when a cell starts (its execute_input message). IPython swaps sys.stdout.write around every
    # cell, so the cap sits on the kernel's session, which every stream message goes through. (Bypassing it
    # only hurts the student: the grader drops any message over its size limit unread.)
    try:
        import IPython
        session = IPython.get_ipython().kernel.session

        def send(stream, msg_or_type, content=None, *args, _send=session.send, _budget=[out_limit],
                 _limit=out_limit, _type=type, _dict=dict, _str=str, _len=len, _max=max, **kwargs):
            kind, body = msg_or_type, content
            if _type(msg_or_type) is _dict:  # a message built beforehand (ipykernel 7's streams)
                kind, body = msg_or_type.get("msg_type"), msg_or_type.get("content")
            if kind == "execute_input":
                _budget[0] = _limit
            elif kind == "stream" and _type(body) is _dict:
                text = body.get("text", "")
                if _type(text) is _str and _len(text) > _budget[0]:
                    text = text[:_max(0, _budget[0])]
                    body["text"] = text
                _budget[0] -= _len(text)
            return _send(stream, msg_or_type, content, *args, **kwargs)

        session.send = send
    except Exception:
        pass


def withhold_answer_key():
    """Take the answer key out of every lesson's question module (see install_sandbox's `withhold`)."""
    try:
        from distlab.lessons import LESSONS
        from distlab.lessons.questions import NOT_ATTEMPTED, CheckResult, Solution
    except Exception:
        LESSONS = {}
    for lesson in list(LESSONS.values()):
        try:
            module = lesson.question_module()
        except Exception:
            continue
        if module is None:
            continue
        for q in list(getattr(module, "QUESTIONS", {}).values()):
            if type(q).__name__ == "QuestionStub":  # the student view's: nothing to withhold
                continue
            def check(answer=None, _q=q, _r=CheckResult, _s=NOT_ATTEMPTED):
                return _r(_q.name, _s, "checked by the grader after the notebook has run", 0.0, _q.points)

            def withheld(*args, **kwargs):
                raise PermissionError("distlab grading sandbox: the answer key is not available while grading")

            for attr, value in (("check", check), ("expected", withheld), ("explain", withheld),
                                ("solution", lambda _S=Solution: _S("withheld while grading")),
                                ("unbound", {}), ("feedback", {})):  # the templates a variant copy would re-bind,
                                # and the per-mistake feedback (it names every wrong option): gone too
                try:
                    object.__setattr__(q, attr, value)
                except Exception:
                    pass
        for attr, value in list(vars(module).items()):
            if callable(value) and getattr(value, "__module__", None) == module.__name__ \
                    and not isinstance(value, type):
                try:
                    delattr(module, attr)
                except Exception:
                    pass
    # A per-student notebook rebinds its questions to its own numbers (distlab.lessons.variants.personal):
    # while grading, that returns the withheld questions above (the grader checks with the student's seed).
    try:
        import distlab.lessons.variants as variants_module

        def personal(lesson, names, seed=None, release=None, _lessons=LESSONS):
            questions = getattr(_lessons[lesson].question_module(), "QUESTIONS", {})
            picked = [questions[name] for name in names.split()]
            return tuple(picked) if len(picked) != 1 else picked[0]

        variants_module.personal = personal
    except Exception:
        pass


def limit_resources(memory_limit, fsize_limit):
    """Cap the address space and the size of written files (bytes, 0: no limit)."""
    try:
        import resource
        if memory_limit:
            resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))
        if fsize_limit:
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize_limit, fsize_limit))
    except Exception:
        pass


def remove_unaudited_calls():
    """Take away the calls that create processes or files, or signal processes, without an audit event."""
    import posix
    # The one call that creates processes without an audit event: take it away (re-importing is refused below).
    try:
        import _posixsubprocess
        del _posixsubprocess.fork_exec
    except Exception:
        pass
    # mknod and mkfifo create files, readline writes its history file and pidfd_send_signal signals any
    # process, all without an audit event: take them away too (re-importing these modules is refused below)
    import os as _os
    import signal as _signal
    try:
        import readline as _readline
    except Exception:
        _readline = None
    for module, attrs in ((posix, ("mknod", "mkfifo", "pidfd_open")), (_os, ("mknod", "mkfifo", "pidfd_open")),
                          (_signal, ("pidfd_send_signal",)),
                          (_readline, ("write_history_file", "append_history_file", "read_history_file",
                                       "read_init_file"))):
        for attr in attrs:
            try:
                delattr(module, attr)
            except Exception:
                pass
    import subprocess as _sp
    for attr in ("_fork_exec", "_posixsubprocess"):
        if hasattr(_sp, attr):
            try:
                setattr(_sp, attr, None)
            except Exception:
                pass


def path_resolver():
    """resolve(path, dir_fd=None): a path's absolute form from C calls only (bound as default arguments)."""
    import posix
    import pathlib

    def resolve(path, dir_fd=None, _lstat=posix.lstat, _readlink=posix.readlink, _getcwd=posix.getcwd,
                _fspath=posix.fspath, _type=type, _str=str, _bytes=bytes, _int=int,
                _path_types=(pathlib.PosixPath, pathlib.PurePosixPath),
                _OSError=OSError, _PermissionError=PermissionError, _S_IFMT=0o170000, _S_IFLNK=0o120000):
        """The absolute path with symlinks and '..' resolved (missing tails kept), from C calls only."""
        t = _type(path)
        if t is _int:
            return _readlink("/proc/self/fd/" + _str(path))
        if t is not _str and t is not _bytes and t not in _path_types:
            raise _PermissionError("distlab grading sandbox: refusing a path object of type " + t.__name__)
        p = _fspath(path)
        if _type(p) is _bytes:
            p = p.decode("utf-8", "surrogateescape")
        if _type(p) is not _str or "\x00" in p:
            raise _PermissionError("distlab grading sandbox: bad path")
        if not p.startswith("/"):
            base = _getcwd() if (dir_fd is None or dir_fd == -1) else _readlink("/proc/self/fd/" + _str(dir_fd))
            p = base + "/" + p
        stack = [c for c in p.split("/") if c and c != "."]
        stack.reverse()
        out = []
        links = 0
        while stack:
            c = stack.pop()
            if c == "..":
                if out:
                    out.pop()
                continue
            candidate = "/" + "/".join(out + [c])
            try:
                mode = _lstat(candidate).st_mode
            except _OSError:
                out.append(c)
                continue
            if (mode & _S_IFMT) == _S_IFLNK:
                links += 1
                if links > 40:
                    raise _PermissionError("distlab grading sandbox: too many symbolic links")
                target = _readlink(candidate)
                if target.startswith("/"):
                    out = []
                more = [x for x in target.split("/") if x and x != "."]
                more.reverse()
                stack.extend(more)
            else:
                out.append(c)
        return "/" + "/".join(out)
    return resolve


def path_checks(resolve, roots, allowed_files, secret_parts):
    """(inside, relative_up, secret, is_dir_outside): the audit hook's questions about a path."""
    import pathlib, posix
    roots_t = tuple(resolve(r) for r in roots)
    files_t = frozenset(resolve(f) for f in allowed_files)

    def inside(path, dir_fd=None, _resolve=resolve, _roots=roots_t, _files=files_t):
        p = _resolve(path, dir_fd)
        if p in _files:
            return True
        for root in _roots:
            if p == root or p.startswith(root + "/"):
                return True
        return False

    def relative_up(path, _type=type, _str=str, _bytes=bytes, _fspath=posix.fspath, _path_types=(
            pathlib.PosixPath, pathlib.PurePosixPath)):
        """True when `path` is relative and has a '..' component (or is not a plain path)."""
        t = _type(path)
        if t is not _str and t is not _bytes and t not in _path_types:
            return True
        p = _fspath(path)
        if _type(p) is _bytes:
            p = p.decode("utf-8", "surrogateescape")
        if p.startswith("/"):
            return False
        for c in p.split("/"):
            if c == "..":
                return True
        return False

    def secret(path, _resolve=resolve, _parts=tuple(secret_parts), _type=type, _int=int, _OSError=OSError):
        """True when the resolved `path` contains one of `secret_parts` (an fd: its file's path)."""
        try:
            p = _resolve(path)
        except _OSError:
            return False
        for part in _parts:
            if part in p:
                return True
        return False

    def is_dir_outside(path, _resolve=resolve, _inside=inside, _stat=posix.stat, _type=type, _int=int,
                       _OSError=OSError, _S_IFMT=0o170000, _S_IFDIR=0o040000):
        if _type(path) is _int:
            return False
        try:
            if (_stat(_resolve(path)).st_mode & _S_IFMT) != _S_IFDIR:
                return False
        except _OSError:
            return False
        return not _inside(path)
    return inside, relative_up, secret, is_dir_outside


def event_tables():
    """The audit events the hook refuses or checks, grouped by where their paths are, and the writing flags."""
    import posix
    blocked = frozenset((
        "os.system", "os.exec", "os.fork", "os.forkpty", "os.posix_spawn", "os.spawn", "os.startfile",
        "subprocess.Popen", "pty.spawn", "signal.pthread_kill", "sys.settrace",
        "sys.setprofile", "sys.monitoring.register_callback", "sys.addaudithook", "resource.setrlimit",
        "resource.prlimit", "sqlite3.enable_load_extension", "sqlite3.load_extension", "os.add_dll_directory",
        "os.setxattr", "os.removexattr", "os.chflags", "os.lchflags", "webbrowser.open",
    ))
    # events on one path, by the position of their dir_fd argument (None: they have none)
    fd_at_1 = frozenset(("os.remove", "os.rmdir", "shutil.rmtree"))
    fd_at_2 = frozenset(("os.mkdir", "os.chmod", "os.lchmod"))
    fd_at_3 = frozenset(("os.chown", "os.lchown", "os.utime"))
    no_fd = frozenset(("os.truncate", "tempfile.mkstemp", "tempfile.mkdtemp"))
    two_paths = frozenset(("os.rename", "os.link", "shutil.move"))
    dest_only = frozenset(("os.symlink", "shutil.copyfile", "shutil.copymode", "shutil.copystat",
                           "shutil.copytree"))
    no_import = frozenset(("_posixsubprocess", "_ctypes", "ctypes", "_gdbm", "_dbm", "_testcapi",
                           "_testinternalcapi", "_xxsubinterpreters", "_xxinterpchannels", "_lsprof",
                           "posix", "os", "signal", "_signal", "readline"))
    write_flags = posix.O_WRONLY | posix.O_RDWR | posix.O_CREAT | posix.O_TRUNC | posix.O_APPEND
    return blocked, fd_at_1, fd_at_2, fd_at_3, no_fd, two_paths, dest_only, no_import, write_flags


def audit_hook(tables, resolve, inside, is_dir_outside, relative_up, secret):
    """The audit hook: refuses writes outside the allowed paths, reading the answer key, new processes..."""
    import posix
    blocked, fd_at_1, fd_at_2, fd_at_3, no_fd, two_paths, dest_only, no_import, write_flags = tables

    def hook(event, args, _blocked=blocked, _fd1=fd_at_1, _fd2=fd_at_2, _fd3=fd_at_3, _no_fd=no_fd,
             _two=two_paths, _dest=dest_only,
             _no_import=no_import, _inside=inside, _dir_outside=is_dir_outside, _write_flags=write_flags,
             _PermissionError=PermissionError, _type=type, _int=int, _str=str, _bytes=bytes, _len=len, _id=id,
             _relative_up=relative_up, _secret=secret, _getpid=posix.getpid, _protected=frozenset()):
        deny = None
        if event == "open":
            path, mode, flags = args[0], args[1], args[2]
            writing = (_type(flags) is _int and (flags & _write_flags)) or (
                _type(mode) is _str and ("w" in mode or "a" in mode or "x" in mode or "+" in mode))
            if writing:
                if _type(path) is not _int and not _inside(path):
                    deny = "writing " + _str(path)
                elif _relative_up(path):
                    # the event carries no dir_fd: os.open(rel, dir_fd=fd) resolves `rel` from fd, not the
                    # cwd; a relative path that never goes up stays under whatever folder it starts from
                    deny = "writing a relative path with '..' (" + _str(path) + ")"
            elif _dir_outside(path):
                deny = "opening the folder " + _str(path)  # a dir_fd would let os.open(..., dir_fd=) escape
            elif _secret(path):
                deny = "reading " + _str(path) + " (part of the answer key)"
        elif event in _fd1 or event in _fd2 or event in _fd3 or event in _no_fd:
            at = 1 if event in _fd1 else 2 if event in _fd2 else 3 if event in _fd3 else 99
            dir_fd = args[at] if _len(args) > at and _type(args[at]) is _int else None
            if not _inside(args[0], dir_fd):
                deny = event + " on " + _str(args[0])
        elif event in _two:
            sfd = args[2] if _len(args) > 2 and _type(args[2]) is _int else None
            dfd = args[3] if _len(args) > 3 and _type(args[3]) is _int else None
            if not (_inside(args[0], sfd) and _inside(args[1], dfd)):
                deny = event + " of " + _str(args[0]) + " to " + _str(args[1])
        elif event == "os.symlink":  # a link inside pointing out would let a later dir_fd-relative path escape
            deny = "creating a symbolic link"
        elif event in _dest:
            dfd = args[2] if _len(args) > 2 and _type(args[2]) is _int else None
            if not _inside(args[1], dfd):
                deny = event + " to " + _str(args[1])
        elif event == "socket.bind":  # a unix socket file is created at its path (abstract names are fine)
            address = args[1] if _len(args) > 1 else None
            if (_type(address) is _str or _type(address) is _bytes) and address[:1] not in ("", "\x00", b"\x00") \
                    and not _inside(address):
                deny = "binding a socket at " + _str(address)
        elif event == "sqlite3.connect":  # even ":memory:": its ATTACH creates a file anywhere
            deny = "opening an SQLite database"
        elif event == "import":
            if args[0] in _no_import:
                deny = "importing " + _str(args[0])
        elif event == "os.kill" or event == "os.killpg":
            if args[0] != _getpid():  # the kernel interrupting itself (an interrupt request) is fine
                deny = event + " of another process"
        elif event == "object.__setattr__":
            if _id(args[0]) in _protected:
                deny = "changing the grading sandbox"
        elif event in _blocked or event.startswith("ctypes."):
            deny = event
        if deny is not None:
            raise _PermissionError("distlab grading sandbox: " + deny + " is not allowed while grading")

    # the hook's last default: the ids of its own functions, whose code and defaults may then not change
    hook.__defaults__ = hook.__defaults__[:-1] + (frozenset(map(id, (hook, resolve, inside, is_dir_outside, relative_up, secret))),)
    return hook



def collect_answers(ns, nonce, names, max_chars, budget, max_items=100000, max_depth=6):
    """Print the variables `names` of namespace `ns` as JSON between two markers carrying `nonce`.

    Each value is encoded by type (numbers as their repr, Quantities as magnitude and units, containers
    item by item, anything else as its type name); a string of more than max_chars characters arrives as
    "too large", never cut (its first max_chars characters could read as another answer), and so does an
    answer whose JSON exceeds `budget` characters.
    """
    import itertools, json, numbers, sys
    left = [max_items]

    def enc(v, depth):
        left[0] -= 1
        t = type(v)
        if v is None:
            return {"t": "none"}
        if v is Ellipsis:
            return {"t": "ellipsis"}
        if isinstance(v, bool):
            return {"t": "bool", "v": bool(v)}
        if isinstance(v, str):  # whole or not at all: a cut text could read as another answer (red team 31)
            s = str.__str__(v)
            if len(s) > max_chars:
                return {"t": "other", "type": "str of more than %d characters" % max_chars, "why": "too large"}
            return {"t": "str", "v": s}
        if t.__name__ == "Quantity" and t.__module__.split(".")[0] == "pint":
            m = v.magnitude
            if isinstance(m, bool) or not isinstance(m, numbers.Real):
                return {"t": "other", "type": "Quantity of " + type(m).__name__}
            m = int(m) if isinstance(m, numbers.Integral) else float(m)
            return {"t": "quantity", "magnitude": repr(m), "units": format(v.units, "C")}
        if isinstance(v, numbers.Integral):
            return {"t": "int", "v": repr(int(v))}
        if isinstance(v, numbers.Real):
            return {"t": "float", "v": repr(float(v))}
        if depth >= max_depth or left[0] <= 0:
            return {"t": "other", "type": t.__name__, "why": "too large"}
        if t.__module__ == "numpy" and t.__name__ == "ndarray":
            if v.size > left[0]:
                return {"t": "other", "type": "ndarray", "why": "too large"}
            return {"t": "ndarray", "dtype": str(v.dtype), "v": enc(v.tolist(), depth + 1)}
        if isinstance(v, (list, tuple, set, frozenset, range)):
            kind = next(k.__name__ for k in (list, tuple, set, frozenset, range) if isinstance(v, k))
            items = list(itertools.islice(iter(v), left[0] + 1))
            if len(items) > left[0]:
                return {"t": "other", "type": kind, "why": "too large"}
            return {"t": "seq", "kind": kind, "v": [enc(x, depth + 1) for x in items]}
        if isinstance(v, dict):
            items = list(itertools.islice(iter(v.items()), left[0] + 1))
            if len(items) > left[0]:
                return {"t": "other", "type": "dict", "why": "too large"}
            return {"t": "dict", "v": [[enc(k, depth + 1), enc(x, depth + 1)] for k, x in items]}
        return {"t": "other", "type": t.__name__}

    out = {}
    for key in names:
        if key not in ns:
            continue
        left[0] = max_items
        try:
            entry = json.dumps(enc(ns[key], 0))
            if len(entry) > budget:
                entry = json.dumps({"t": "other", "type": type(ns[key]).__name__, "why": "too large"})
        except Exception as exc:
            entry = json.dumps({"t": "other", "type": type(ns[key]).__name__, "error": type(exc).__name__})
        out[key] = entry
    text = "{" + ", ".join(json.dumps(k) + ": " + v for k, v in out.items()) + "}"
    sys.stdout.write("\n" + "DISTLAB-ANSWERS-BEGIN-" + nonce + text + "DISTLAB-ANSWERS-END-" + nonce + "\n")
    sys.stdout.flush()


#: what the kernel compiles to install the sandbox: install_sandbox and every step it calls
SANDBOX = (install_sandbox, preload_modules, cap_output, withhold_answer_key, limit_resources,
           remove_unaudited_calls, path_resolver, path_checks, event_tables, audit_hook)
