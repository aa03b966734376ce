export declare const repoRoot: string;
export declare const SOURCE_CONDITION: string;
export declare function workspaceDirs(): string[];
export declare function workspaceExports(): { name: string; dir: string; specifier: string; source: string }[];
export declare function sourceAliases(): { find: RegExp; replacement: string }[];
