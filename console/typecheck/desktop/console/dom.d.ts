// The console's dom.js as the desktop window imports it (./console/dom.js,
// served from console.Assets()); tsconfig.json's rootDirs maps it here.
export * from '../../../web/assets/dom.js';
