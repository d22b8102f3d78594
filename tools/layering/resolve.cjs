// The resolver settings of the layering check, in the webpack-config shape
// dependency-cruiser reads (its `webpackConfig` option is how a config passes
// resolver aliases). Each declared entry point of a workspace package is
// aliased, exactly (`$`), to its source file, so `@csiplug/core` means
// `packages/core/src/index.ts` whether or not `dist/` has been built. Any
// other `@csiplug/...` specifier is left to node resolution, where the
// `no-deep-import` rule catches it.
'use strict';

const { entryPoints } = require('./workspace.cjs');

/** @param {{ root: string }} env the tree being checked (passed by .dependency-cruiser.cjs) */
module.exports = (env) => {
  if (!env || typeof env.root !== 'string') {
    throw new Error('layering: tools/layering/resolve.cjs needs env.root, the tree to check (see .dependency-cruiser.cjs)');
  }
  return {
    resolve: {
      alias: Object.fromEntries(entryPoints(env.root).map(({ specifier, source }) => [`${specifier}$`, source])),
    },
  };
};
