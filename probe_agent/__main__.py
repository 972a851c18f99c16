"""`python -m probe_agent`: the agent's command line (probe_agent.main)."""

import sys

from probe_agent.main import main

sys.exit(main())
