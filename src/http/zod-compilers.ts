import type { FastifyInstance, FastifyServerOptions } from "fastify";
import { serializerCompiler, validatorCompiler } from "fastify-type-provider-zod";

type CompilersFactory = NonNullable<NonNullable<FastifyServerOptions["schemaController"]>["compilersFactory"]>;

/**
 * Fastify options for apps whose every schema is zod: Fastify's own compilers (ajv,
 * fast-json-stringify and what they import) would never be used, so they are not loaded.
 * (Fastify's types describe factories of ajv-style compilers; at run time any route compiler will do.)
 */
export const zodSchemaController: FastifyServerOptions["schemaController"] = {
  compilersFactory: { buildValidator: () => validatorCompiler, buildSerializer: () => serializerCompiler } as unknown as CompilersFactory,
};

/** Validates request parts and serializes replies with the routes' zod schemas. */
export function useZodCompilers(app: FastifyInstance): void {
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
}
