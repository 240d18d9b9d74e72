// The console's format.js as the desktop window imports it (./console/format.js,
// served from console.Assets()); tsconfig.json's rootDirs maps it here.
export * from '../../../web/assets/format.js';
