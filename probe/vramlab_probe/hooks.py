"""Phases, steps and out-of-memory from PyTorch's own hooks, with no change to the program:

  FORWARD         the outermost module's forward: global module forward pre/post hooks
                  (torch.nn.modules.module.register_module_forward_pre_hook / _hook) with a depth
                  count until the first optimizer step ends; from then on hooks on the modules
                  seen outermost (the roots) only, so that the program's other module calls run
                  PyTorch's hook-free path again. A forward while backward runs (activation
                  checkpointing's recompute) is part of BACKWARD.
  BACKWARD        torch.autograd.backward (which Tensor.backward calls), wrapped.
  OPTIMIZER_STEP  torch.optim's global step pre/post hooks (PyTorch >= 2.0); before 2.0, each
                  optimizer's step wrapped when it is constructed.
  steps           one per outermost optimizer step; micro-steps count gradient-enabled outermost
                  forwards within a step (0-based).
  out of memory   CUDA: the caching allocator's OOM observer (the request and what was free at the
                  refusal); CPU: an allocation refused under RLIMIT_DATA, recognised in the
                  exception that ends the program (sys.excepthook).
"""
import functools
import importlib
import importlib.abc
import importlib.util
import re
import sys
import threading
import time
import types
import weakref


class _TorchImportWatcher(importlib.abc.MetaPathFinder):
    """Calls `callback(torch)` right after `import torch` has executed, before the program's
    next statement: so the probe's limits apply before the program's first tensor."""

    def __init__(self, callback):
        self.callback = callback

    def find_spec(self, name, path, target=None):
        if name != "torch":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec("torch")
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        exec_module = loader.exec_module
        callback = self.callback

        def exec_and_attach(module):
            exec_module(module)
            try:
                callback(module)
            except Exception as error:  # noqa: BLE001 - the program runs without its probe
                print(f"vramlab probe: not active: {error}", file=sys.stderr)

        loader.exec_module = exec_and_attach
        return spec


def on_torch_import(callback):
    if "torch" in sys.modules:
        callback(sys.modules["torch"])
    else:
        sys.meta_path.insert(0, _TorchImportWatcher(callback))


def install(torch, probe):
    tracker = _PhaseTracker(torch, probe)
    tracker.install()
    _install_excepthook(probe)
    return tracker


class _PhaseTracker:
    def __init__(self, torch, probe):
        self.torch = torch
        self.probe = probe
        self.depth = 0
        self.in_backward = 0
        self.in_step = 0
        self.roots = weakref.WeakSet()
        self.optimizers = weakref.WeakSet()
        self.step_started = None
        self.losses = []
        self.global_hooks = []
        self.gradients_counted = False
        self.main_thread = threading.main_thread()

    def install(self):
        module = self.torch.nn.modules.module
        self.global_hooks = [module.register_module_forward_pre_hook(self.forward_pre),
                             module.register_module_forward_hook(self.forward_post)]
        autograd = self.torch.autograd
        original_backward = autograd.backward

        @functools.wraps(original_backward)
        def backward(tensors, *args, **kwargs):
            self.backward_begin(tensors)
            try:
                return original_backward(tensors, *args, **kwargs)
            finally:
                self.backward_end()

        autograd.backward = backward
        optimizer_module = importlib.import_module("torch.optim.optimizer")
        if hasattr(optimizer_module, "register_optimizer_step_pre_hook"):
            optimizer_module.register_optimizer_step_pre_hook(
                lambda optimizer, args, kwargs: self.step_begin(optimizer))
            optimizer_module.register_optimizer_step_post_hook(
                lambda optimizer, args, kwargs: self.step_end(optimizer))
        else:
            self._wrap_optimizer_steps()

    def _wrap_optimizer_steps(self):
        optimizer_class = self.torch.optim.Optimizer
        original_init = optimizer_class.__init__
        tracker = self

        @functools.wraps(original_init)
        def init(optimizer, *args, **kwargs):
            original_init(optimizer, *args, **kwargs)
            bound = optimizer.step

            def step(self_, *step_args, **step_kwargs):
                tracker.step_begin(self_)
                try:
                    return bound(*step_args, **step_kwargs)
                finally:
                    tracker.step_end(self_)

            # A bound method, as LR schedulers expect of optimizer.step.
            optimizer.step = types.MethodType(step, optimizer)

        optimizer_class.__init__ = init

    # --- forward ---------------------------------------------------------------------------

    def narrow_to_roots(self):
        """Replaces the global forward hooks by hooks on the roots seen so far (a module first
        called outermost later is not seen). A global hook runs for every module call of the
        program and keeps each off PyTorch's hook-free fast path."""
        roots = list(self.roots)
        if not self.global_hooks or not roots:
            return
        for handle in self.global_hooks:
            handle.remove()
        self.global_hooks = []
        for root in roots:
            root.register_forward_pre_hook(self.forward_pre)
            root.register_forward_hook(self.forward_post)

    def forward_pre(self, module, inputs):
        if self.in_backward or threading.current_thread() is not self.main_thread:
            return
        if self.depth == 0:
            self.roots.add(module)
            if self.step_started is None:
                self.step_started = time.monotonic()
            if self.torch.is_grad_enabled():
                self.probe.micro_step += 1
            self.probe.phase_edge("FORWARD", "BEGIN")
        self.depth += 1

    def forward_post(self, module, inputs, output):
        if self.in_backward or threading.current_thread() is not self.main_thread:
            return
        self.depth = max(0, self.depth - 1)
        if self.depth == 0:
            self.probe.phase_edge("FORWARD", "END")

    # --- backward --------------------------------------------------------------------------

    def backward_begin(self, tensors):
        self.depth = 0  # a forward that raised never ended
        if self.in_backward == 0:
            tensor = tensors[0] if isinstance(tensors, (list, tuple)) and tensors else tensors
            if self.torch.is_tensor(tensor) and tensor.numel() == 1:
                self.losses.append(tensor.detach())
            self.probe.phase_edge("BACKWARD", "BEGIN")
        self.in_backward += 1

    def backward_end(self):
        self.in_backward -= 1
        if self.in_backward == 0:
            # Gradients appear in a step's first backward; later micro-steps accumulate into
            # them, and the step's end counts them again.
            if not self.gradients_counted:
                self.probe.count_states(list(self.roots), list(self.optimizers))
                self.gradients_counted = True
            self.probe.phase_edge("BACKWARD", "END")

    # --- optimizer step --------------------------------------------------------------------

    def step_begin(self, optimizer):
        self.in_step += 1
        if self.in_step > 1:
            return
        self.depth = 0
        self.optimizers.add(optimizer)
        self.probe.phase_edge("OPTIMIZER_STEP", "BEGIN")

    def step_end(self, optimizer):
        self.in_step -= 1
        if self.in_step > 0:
            return
        self.probe.count_states(list(self.roots), list(self.optimizers))
        self.probe.phase_edge("OPTIMIZER_STEP", "END")
        now = time.monotonic()
        seconds = now - (self.step_started if self.step_started is not None else now)
        self.step_started = now
        loss = None
        if self.losses:
            loss = float(sum(float(value) for value in self.losses) / len(self.losses))
            self.losses = []
        self.probe.step_ended(seconds, loss)
        self.probe.step += 1
        self.probe.micro_step = -1
        self.gradients_counted = False
        self.narrow_to_roots()


# --- out of memory ------------------------------------------------------------------------

def attach_oom_observer(torch, probe):
    attach = getattr(torch._C, "_cuda_attach_out_of_memory_observer", None)
    if attach is None:
        return False

    def observer(device, requested, device_allocated, device_free):
        probe.out_of_memory(requested, device_free,
                            f"CUDA out of memory: tried to allocate {requested} bytes on device "
                            f"{device} ({device_allocated} allocated, {device_free} free)")

    attach(observer)
    return True


def record_history(torch):
    record = torch.cuda.memory._record_memory_history
    try:
        record(max_entries=100000)
    except TypeError:
        record(True)


_CPU_OOM = re.compile(r"(?:can't allocate memory|not enough memory).*?(\d+) bytes", re.S)


def _install_excepthook(probe):
    previous = sys.excepthook

    def excepthook(kind, value, traceback):
        text = str(value)
        if probe.reader is not None and not probe.oom_reported:
            if isinstance(value, MemoryError) or "out of memory" in text.lower() \
                    or _CPU_OOM.search(text):
                match = _CPU_OOM.search(text)
                requested = int(match.group(1)) if match else 0
                probe.out_of_memory(requested, 0, f"{kind.__name__}: {text}")
        previous(kind, value, traceback)

    sys.excepthook = excepthook
