import sys

from probe_agent.main import main

sys.exit(main())
