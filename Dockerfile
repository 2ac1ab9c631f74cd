FROM node:20-bookworm-slim
WORKDIR /app
# Toolchain for better-sqlite3 when no prebuilt binary matches.
RUN apt-get update && apt-get install -y --no-install-recommends python3 make g++ && rm -rf /var/lib/apt/lists/*
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund
COPY . .
RUN npm run build
ENV HOST=0.0.0.0 PORT=2024 DATA_DIR=/data
EXPOSE 2024
CMD ["node", "--enable-source-maps", "dist/main.js"]
