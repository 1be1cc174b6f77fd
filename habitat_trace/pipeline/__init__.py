"""One path from traces to their prediction on a target GPU, shared by every command, the API, the hook and the
analyses: ``Run`` (run.py) holds a run's ranks and predicts them on a target; ``Options`` (options.py) are what
every command takes; the host's clock (host.py), the step figures (figures.py) and the target document emit
writes (document.py). Nothing here prints or writes files.
"""
from habitat_trace.pipeline.figures import iteration_figures, steady_iteration
from habitat_trace.pipeline.host import Host, HostClock, host_clock, measured_step_ns, overhead_removed
from habitat_trace.pipeline.options import DataParallel, Deployment, Options
from habitat_trace.pipeline.run import Headline, RankReplay, Replay, Run, resolve_origin

__all__ = ["DataParallel", "Deployment", "Headline", "Host", "HostClock", "Options", "RankReplay", "Replay", "Run",
           "host_clock", "iteration_figures", "measured_step_ns", "overhead_removed", "resolve_origin",
           "steady_iteration"]
