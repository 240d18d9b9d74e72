// The console's ui.js as the desktop window imports it (./console/ui.js,
// served from console.Assets()); tsconfig.json's rootDirs maps it here.
export * from '../../../web/assets/ui.js';
