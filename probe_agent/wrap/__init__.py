"""Run a command under the agent's eyes (`--wrap -- COMMAND ...`): the provenance envelope.

The agent probes the host (the full contract chain, the normal health.json), starts the command,
samples every GPU while it runs, probes again after it exits, and writes one
`provenance.json` into `--out`: the command's argv, exit code and wall time, both probes, the
samples, and a short verdict (throttling seen, SM clock against its max, other processes, what
changed between the two probes). The format is docs/provenance.md and
schema/provenance-1.schema.json.

One module per part: envelope (main: the probes, the command and the sampler put together,
provenance.json written), command (the command started, waited for, its signals passed on, its
output's tail kept), sampler (the sampling thread and whose each GPU process is), sample_stream
(every sample counted, a bounded number kept), verdict (the short answer and what changed
between the probes). Nothing is imported here.
"""
