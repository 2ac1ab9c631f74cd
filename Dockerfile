# This repository's own image: the server built from source, serving the example graph of its
# langgraph.json. A user's LangGraph.js project gets its Dockerfile from `agent-server dockerfile`
# (src/cli/dockerfile.ts), which installs the published package into the project instead; both
# listen on 8000 inside the container, so docker-compose.yml fits either.
FROM node:20-bookworm-slim
WORKDIR /app
# Toolchain for better-sqlite3 when no prebuilt binary matches.
RUN apt-get update && apt-get install -y --no-install-recommends python3 make g++ && rm -rf /var/lib/apt/lists/*
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund
COPY . .
RUN npm run build
# 8000 as in the official LangGraph images (and the generated Dockerfile); 2024 stays the default outside Docker.
ENV HOST=0.0.0.0 PORT=8000 DATA_DIR=/data
# The read models (SQLite) and, without EVENTSTORE_URL, the log itself.
VOLUME /data
EXPOSE 8000
# /ok is public and answers 503 while the server cannot serve writes; node, as the slim image has no curl.
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 CMD ["node", "-e", "fetch(\"http://127.0.0.1:\" + (process.env.PORT || 8000) + \"/ok\").then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
CMD ["node", "--enable-source-maps", "dist/main.js"]
