"""A module whose import fails: discovery must say so, never skip it."""

import jobs_core.modules

raise ImportError("this module's dependency is missing (on purpose)")

module = jobs_core.modules.Module(name="broken")
