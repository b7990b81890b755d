"""The local debugger: a page shipped in the package (`static/`: HTML, plain ES modules and CSS, no build step)
that `reactgraph ui` and `reactgraph serve --ui` serve at /ui (`page`). It talks only to the service's own Agent
Server API, from the same origin: nothing it loads or sends leaves the machine it is served from."""
