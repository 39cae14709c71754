/** Teams of users (`t.teams`): a team can own documents (`scope: "Team:<id>"`) and be granted access. */
import type { Http } from "./http.js";
import { segments } from "./http.js";

export type TeamRole = "owner" | "member";

export interface Team {
  _id: string;
  name: string;
  parentTeam: string | null;
  createdAt: string;
  updatedAt: string;
}

export interface TeamMember {
  _id: string;
  email: string | null;
  role: TeamRole;
}

export interface PendingInvite {
  teamId: string;
  teamName: string;
  /** null while the caller's address is unverified (accept through the mailed link). */
  invitationToken: string | null;
  role: TeamRole;
  expiresAt: string;
}

export interface Page {
  skip?: number;
  limit?: number;
}

export class Teams {
  constructor(private readonly http: Http) {}

  /** A new team (a sub-team of `parentTeam`, which the caller must own); the caller is its owner. */
  create(name: string, options: { parentTeam?: string } = {}): Promise<Team> {
    return this.http.request("POST", "/authentication/teams", { body: { name, ...options } });
  }

  /** The caller's teams; `search` matches part of the name. */
  list(options: Page & { search?: string } = {}): Promise<{ teams: Team[]; count: number }> {
    return this.http.request("GET", "/authentication/teams", { query: { ...options } });
  }

  members(teamId: string, options: Page = {}): Promise<{ members: TeamMember[]; count: number }> {
    return this.http.request("GET", `/authentication/teams${segments(teamId)}/members`, { query: { ...options } });
  }

  /** Invite an address (owners); the server mails the link. */
  invite(teamId: string, email: string, role: TeamRole = "member"): Promise<{ invitationToken: string }> {
    return this.http.request("POST", `/authentication/teams${segments(teamId)}/invite`, { body: { email, role } });
  }

  /** The caller's pending invites, with the tokens to accept them. */
  invites(): Promise<{ invites: PendingInvite[]; count: number }> {
    return this.http.request("GET", "/authentication/teams/invites");
  }

  /** Join with the invited role (the invite's address must be the caller's). */
  accept(invitationToken: string): Promise<Team & { role: TeamRole }> {
    return this.http.request("GET", "/authentication/teams/invite/accept", { query: { invitationToken } });
  }
}
